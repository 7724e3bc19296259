"""User data classes run by Tacker for this VNF package."""
