"""Gathering as small finders: each a function of explicit inputs (a transport and the
user's hints) that returns facts, composed by `dflash_doctor.gather.gather`."""
