#include "types.h"

#include <cstdint>

#include "op.h"

namespace ringreduce {

MPI_Datatype DatatypeOf(int dtype) {
  switch (dtype) {
    case kFloat32: return MPI_FLOAT;
    case kFloat64: return MPI_DOUBLE;
    case kInt8: return MPI_INT8_T;
    case kInt16: return MPI_INT16_T;
    case kInt32: return MPI_INT32_T;
    case kUint8: return MPI_UINT8_T;
    case kUint16: return MPI_UINT16_T;
    case kUint32: return MPI_UINT32_T;
    case kInt64: return MPI_INT64_T;
    case kUint64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

const char* DTypeName(int dtype) {
  static const char* const kDTypeNames[kDTypeCount] = {"float32", "float64", "int8",   "int16", "int32",
                                                        "uint8",   "uint16",  "uint32", "int64", "uint64"};
  return dtype >= 0 && dtype < kDTypeCount ? kDTypeNames[dtype] : "?";
}

const char* ReduceName(int reduce) {
  // The addon exports this table as `reduceOps` (addon.cc): the loader checks it against
  // kReduceOpCodes in native_binding.ts.
  static const char* const kReduceNames[kReduceCount] = {"sum", "average", "min",  "max",
                                                          "product", "band", "bor", "bxor"};
  return reduce >= 0 && reduce < kReduceCount ? kReduceNames[reduce] : "?";
}

bool IsFloatDType(int dtype) { return dtype == kFloat32 || dtype == kFloat64; }

bool IsBitwise(int reduce) { return reduce == kBand || reduce == kBor || reduce == kBxor; }

size_t BytesPerElement(int dtype) {
  static const size_t kSizes[kDTypeCount] = {4, 8, 1, 2, 4, 1, 2, 4, 8, 8};
  return dtype >= 0 && dtype < kDTypeCount ? kSizes[dtype] : 0;
}

namespace {

template <typename T, typename U>
void AddWrapping(const void* in, void* inout, int count) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < count; i++) b[i] = static_cast<T>(static_cast<U>(a[i]) + static_cast<U>(b[i]));
}

void WrappingSum(void* in, void* inout, int* count, MPI_Datatype* type) {
  if (*type == MPI_INT8_T) AddWrapping<int8_t, uint8_t>(in, inout, *count);
  else if (*type == MPI_UINT8_T) AddWrapping<uint8_t, uint8_t>(in, inout, *count);
  else if (*type == MPI_INT16_T) AddWrapping<int16_t, uint16_t>(in, inout, *count);
  else if (*type == MPI_UINT16_T) AddWrapping<uint16_t, uint16_t>(in, inout, *count);
}

MPI_Op WrappingSumOp() {
  static MPI_Op op = MPI_OP_NULL;  // freed by MPI_Finalize
  if (op == MPI_OP_NULL) MPI_Op_create(&WrappingSum, 1, &op);
  return op;
}

}  // namespace

void CreateOps() { WrappingSumOp(); }

MPI_Op MpiOpOf(int reduce, int dtype) {
  const bool narrow = dtype == kInt8 || dtype == kUint8 || dtype == kInt16 || dtype == kUint16;
  switch (reduce) {
    case kSum:
    case kAverage: return narrow ? WrappingSumOp() : MPI_SUM;
    case kMin: return MPI_MIN;
    case kMax: return MPI_MAX;
    case kProduct: return MPI_PROD;
    case kBand: return MPI_BAND;
    case kBor: return MPI_BOR;
    case kBxor: return MPI_BXOR;
    default: return MPI_OP_NULL;
  }
}

const char* FailureCode(Failure failure) {
  switch (failure) {
    case Failure::kNone: return "OK";
    case Failure::kTimeout: return "ETIMEDOUT";
    case Failure::kTruncated: return "ETRUNCATED";
    case Failure::kShort: return "ESHORT";
    case Failure::kMpi: return "EMPI";
    case Failure::kClosed: return "ECLOSED";
    case Failure::kTooLarge: return "ETOOLARGE";
  }
  return "EMPI";
}

template <typename T>
static void Divide(T* data, size_t count, T size) {
  for (size_t i = 0; i < count; i++) data[i] /= size;
}

void DivideInPlace(int dtype, void* data, size_t count, int size) {
  if (dtype == kFloat32) Divide(static_cast<float*>(data), count, static_cast<float>(size));
  else if (dtype == kFloat64) Divide(static_cast<double*>(data), count, static_cast<double>(size));
}

}  // namespace ringreduce
