"""Every text template the agent shows or sends, named and versioned, in one place."""
