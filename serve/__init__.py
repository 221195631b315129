"""Standing the model up: SGLang recipes, supervisor, canary, benchmark, protocol proxy."""
