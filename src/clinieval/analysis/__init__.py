"""Analysis of scored runs: rankings, win rates, agreement, uncertainty."""
