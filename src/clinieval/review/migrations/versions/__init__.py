"""One module per schema revision; 0001 creates the tables of clinieval.review.db."""
