"""The bottom layer: errors, pagination, locks, ids, text, stemming, database helpers. Everything may import it;
it imports no app of this project."""
