"""trainmedic.logparse"""
