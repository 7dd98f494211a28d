"""What a person sees: the command line (`cli`) and the single-file HTML graph viewer
(`viewer`). It may import everything below it; nothing in irrun imports it.
"""
