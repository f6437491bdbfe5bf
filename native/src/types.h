// The mapping from ringreduce's dtype and reduce-op codes (src/transport/mpi/native_binding.ts)
// to MPI datatypes and ops.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace ringreduce {

// Wire codes of the dtypes, in the order of kDTypes in src/api/dtypes.ts.
enum DTypeCode { kFloat32, kFloat64, kInt8, kInt16, kInt32, kUint8, kUint16, kUint32, kInt64, kUint64, kDTypeCount };

// Codes of the reduce ops, in the order of kReduceOps in src/core/types.ts (append only);
// kReduceOpCodes in src/transport/mpi/native_binding.ts lists the same names in the same order,
// and the loader refuses an addon whose table (ReduceName) differs.
enum ReduceCode { kSum, kAverage, kMin, kMax, kProduct, kBand, kBor, kBxor, kReduceCount };

const char* DTypeName(int dtype);
const char* ReduceName(int reduce);
bool IsFloatDType(int dtype);
bool IsBitwise(int reduce);

MPI_Datatype DatatypeOf(int dtype);
size_t BytesPerElement(int dtype);
// The MPI op for `reduce` on `dtype` ('average' is MPI_SUM; band/bor/bxor are MPI_BAND/MPI_BOR/
// MPI_BXOR, integer dtypes only: the caller checks the pairing). Sums of 8- and 16-bit integers use ringreduce's own op,
// which wraps like C: Open MPI 4.1's AVX reductions saturate them instead (open-mpi/ompi#8045).
// Call after MPI_Init_thread, on the thread that calls MPI.
MPI_Op MpiOpOf(int reduce, int dtype);
// Creates ringreduce's own ops; call before the progress thread starts (MPI_THREAD_SERIALIZED).
void CreateOps();

// 'average' on floats: each element divided by `size` after the MPI sum.
void DivideInPlace(int dtype, void* data, size_t count, int size);

}  // namespace ringreduce
