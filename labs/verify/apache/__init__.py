"""Apache httpd configs, as verify reads and runs them."""
