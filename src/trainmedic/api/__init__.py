"""trainmedic.api"""
