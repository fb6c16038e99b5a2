"""What a fabric, a collective and a schedule are (the model the synthesizers and the judge share)."""
