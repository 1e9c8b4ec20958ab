"""trainmedic.examples"""
