"""Rules that replace the tools nodegate users come from: their settings in, rules out."""
