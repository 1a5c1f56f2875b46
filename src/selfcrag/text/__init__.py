"""Text on the ground floor: words, sentences, terms, cleaning and redaction, as pure functions every layer above
shares (the index cuts passages with them, so it never imports a grader)."""
