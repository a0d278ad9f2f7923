#pragma once
// The data-parallel component (built when MPI is found; link tapegrad::dist): process groups and
// collectives over MPI, and DistributedDataParallel.
#include "tapegrad/dist/ddp.h"
#include "tapegrad/dist/process_group.h"
