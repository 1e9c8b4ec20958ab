"""trainmedic.signatures"""
