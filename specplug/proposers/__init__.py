"""Built-in proposers. Each module is a plugin that registers its methods."""
