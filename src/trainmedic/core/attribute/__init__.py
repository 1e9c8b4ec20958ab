"""trainmedic.core.attribute"""
