"""Fixed Jinja2 templates of the six roles (package data)."""
