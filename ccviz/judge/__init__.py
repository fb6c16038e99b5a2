"""The only judge: the simulator that times a schedule under the link model and lists its violations."""
