"""What a fabric, a collective and a schedule are: units, input checks, topology and link physics,
collectives (chunks with pre- and postconditions), schedules, routes and the memory footprint of a run."""
