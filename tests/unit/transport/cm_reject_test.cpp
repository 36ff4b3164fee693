#include "transport/rdma/cm_reject.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using ferry::transport::rdma::cm_reject_data;
using ferry::transport::rdma::cm_reject_reason;
using ferry::transport::rdma::cm_reject_text;
using ferry::transport::rdma::CmReject;

TEST_CASE("cm reject: each reason survives the connection manager's padding", "[rdma]") {
  for (const CmReject why : {CmReject::NoRoom, CmReject::NoQp, CmReject::OtherDevice}) {
    const auto data = cm_reject_data(why);
    std::vector<unsigned char> padded(148, 0);  // the IB CM pads a reject's private data
    std::copy(data.begin(), data.end(), padded.begin());
    CHECK(cm_reject_reason(padded.data(), padded.size()) == why);
    CHECK(cm_reject_reason(data.data(), data.size()) == why);
  }
  // The bytes ferry has always sent for no room: "ferry", 1, 'B', 0.
  const unsigned char v1[] = {'f', 'e', 'r', 'r', 'y', 1, 'B', 0};
  CHECK(cm_reject_reason(v1, sizeof v1) == CmReject::NoRoom);
}

TEST_CASE("cm reject: anything else is a reject without a reason", "[rdma]") {
  CHECK(cm_reject_reason(nullptr, 0) == CmReject::Unknown);
  const std::vector<unsigned char> zeros(148, 0);  // rdma_reject(id, nullptr, 0), padded
  CHECK(cm_reject_reason(zeros.data(), zeros.size()) == CmReject::Unknown);
  const unsigned char other_version[] = {'f', 'e', 'r', 'r', 'y', 2, 'B', 0};
  CHECK(cm_reject_reason(other_version, sizeof other_version) == CmReject::Unknown);
  const unsigned char unknown_reason[] = {'f', 'e', 'r', 'r', 'y', 1, 'Z', 0};
  CHECK(cm_reject_reason(unknown_reason, sizeof unknown_reason) == CmReject::Unknown);
  const unsigned char short_data[] = {'f', 'e', 'r', 'r', 'y', 1, 'B'};
  CHECK(cm_reject_reason(short_data, sizeof short_data) == CmReject::Unknown);
  CHECK(std::string(cm_reject_text(CmReject::NoQp)).find("could not make a QP") != std::string::npos);
}
