#pragma once
// The data-parallel component (built when MPI is found; link tapegrad::dist): process groups and
// collectives over MPI, DistributedDataParallel, and the Trainer's view of the group (replicas.h).
#include "tapegrad/dist/ddp.h"
#include "tapegrad/dist/process_group.h"
#include "tapegrad/dist/replicas.h"
