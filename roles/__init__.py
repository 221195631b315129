"""The six roles: what each may see, its templates, how its output is parsed."""
