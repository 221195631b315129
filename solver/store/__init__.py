"""The run directory: content-addressed blobs, a hash-chained journal, a manifest."""
