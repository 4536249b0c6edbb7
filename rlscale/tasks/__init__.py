"""Tasks: prompts with reference answers and verifiable rewards."""
