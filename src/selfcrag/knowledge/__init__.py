"""The knowledge base: what builds, stores, loads and searches the index (files or PostgreSQL), and the
embedders it reads with. The reasoners above read stored vectors through it; it imports none of them."""
