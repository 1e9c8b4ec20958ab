"""trainmedic.sources"""
