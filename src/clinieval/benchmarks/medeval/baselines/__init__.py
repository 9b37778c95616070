"""MedEval's adapted-PLM baselines: trained classifiers (TF-IDF + logistic regression, a fine-tuned
MiniLM encoder) and an extractive summary, each written as an arm beside the prompted LLMs."""
