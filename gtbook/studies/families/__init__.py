"""Chapter 7: attention types compared."""
