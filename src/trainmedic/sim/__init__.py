"""trainmedic.sim"""
