"""trainmedic.attribute"""
