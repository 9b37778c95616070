"""Context budgets: which tokenizer counts, how many tokens a record may use, and how it is cut."""
