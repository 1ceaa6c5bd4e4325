"""Okita: online scheduling of unbiased distributed learning jobs across edge sites
(workers, parameter servers and data transfers per time slot)."""
