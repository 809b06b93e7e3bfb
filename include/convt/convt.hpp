// convt/convt.hpp — everything a C++ user of convt needs.
#pragma once

#include "convt/api.hpp"
#include "convt/dtype.hpp"
#include "convt/error.hpp"
#include "convt/problem.hpp"
#include "convt/tensor.hpp"
#include "convt/version.hpp"
