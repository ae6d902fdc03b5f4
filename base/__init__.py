"""The base layer: settings, the host facts their defaults derive from, the error family, the
JSON encoder, the cross-thread hand-off and a prompt's token ids as one buffer.

Everything above may import it; it imports nothing of the project above it (``.importlinter``).
"""
