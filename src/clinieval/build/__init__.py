"""Dataset construction: turning raw instructions and a patient cohort into a benchmark."""
