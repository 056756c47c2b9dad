"""Check functions for the chapter exercises: each recomputes the answer with the engine itself."""
