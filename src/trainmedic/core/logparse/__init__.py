"""trainmedic.core.logparse"""
