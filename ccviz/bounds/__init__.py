"""What no schedule can beat and what the textbook formulas say: alpha-beta costs, lower bounds and the
fabric's bandwidth limit."""
