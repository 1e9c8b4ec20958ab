"""trainmedic.detect"""
