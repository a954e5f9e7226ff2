"""commprof for Python and notebooks: a commprof HDF5 file as pandas DataFrames, and plots
(docs/python.md).

    import commprof
    job = commprof.open("job.h5")
    job.events(kinds=["mpi_collective"])      # one row per event, times on the job's clock
    job.report()["stragglers"]                # the stored cross-rank report
    commprof.plot.wait_bars(job)
"""
from . import plot
from ._job import CommprofFileError, Job, open

__version__ = "0.1.0"
__all__ = ["open", "Job", "CommprofFileError", "plot", "__version__"]
