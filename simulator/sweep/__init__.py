"""Many scenarios: grid and auto enumeration of layouts (:mod:`.grid`), the local process pool
and Dask runners with resume (:mod:`.runner`, :mod:`.dask_runner`), and the MFU regression
check (:mod:`.regress`). Imports the public face (simulate) and below."""
