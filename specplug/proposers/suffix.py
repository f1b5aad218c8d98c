"""placeholder while the suffix proposer is written"""
