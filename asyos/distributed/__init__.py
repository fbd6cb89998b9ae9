"""Asy-OS roles (``Worker``, ``Central``) and their drivers: simulator and MPI."""
