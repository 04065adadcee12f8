"""users."""
