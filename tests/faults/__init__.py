"""Fault injection across the topologies (rayfl.actors.pool, rayfl.engine.loop)."""
