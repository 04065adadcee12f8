"""apis."""
