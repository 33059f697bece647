*** Comments ***
Hardware-in-the-loop suite for Renode's `renode-test`: the stm32f4 firmware on
the STM32F4 Discovery platform of renode/edgedp-stm32f4.repl.

The boot banner is a text line, checked with Renode's UART terminal tester
(Wait For Line On Uart). Everything after it is binary COBS frames, which the
edgedp host package speaks: the Python keyword library tests/robot/robot_keywords.py
connects to the console's server socket (renode/edgedp.resc) and drives the
device through edgedp.device.client, the code `edgedp --target ...` uses.

Suite setup writes build/renode/edgedp-testkey.elf: the production image with
the test key (tests/keys/test-device.key) in its .edp_key section, so the
suite can set the clock and the budget as an operator would. The last three
tests run the stm32f4 test image (build/stm32f4-test/edgedp.elf: test seed,
test key, test commands) for the host harness's own checks: bit-exact against
the NumPy reference, the DP step's cycles from the DWT, the budget kept across
a machine Reset.

Run from the repository root (see renode/README.md):
    make test-renode


*** Settings ***
Documentation       edgedp on Renode (STM32F4 Discovery): boot, INFO, fail-closed
...                 refusals, a DP query, budget exhaustion, recovery from a garbage
...                 frame, and a machine reset (spend kept, clock lost) on the production
...                 image; on the test image, answers bit-exact against the NumPy reference,
...                 the DP step under 100 us at 168 MHz and the budget across a reset.

Resource            ${RENODEKEYWORDS}
# 60 s per answer: the first query after a CONFIG on the production image waits out its
# release deadline, busy-polling CYCCNT, and Renode runs that part slower than real time.
Library             robot_keywords.EdgedpKeywords    timeout=60

Suite Setup         Set Up Suite
Suite Teardown      Teardown
Test Setup          Start edgedp On Renode
Test Teardown       Stop edgedp On Renode


*** Variables ***
${ELF}              ${CURDIR}/../build/stm32f4/edgedp.elf
# The production image with the test key in .edp_key, as a provisioned device.
${TEST_ELF}         ${CURDIR}/../build/renode/edgedp-testkey.elf
# The stm32f4 test image (make firmware): what `edgedp --target renode` runs.
${TEST_IMAGE}       ${CURDIR}/../build/stm32f4-test/edgedp.elf
${REPLAY_QUERIES}   100
${TARGET_US}        100
${RESC}             ${CURDIR}/edgedp.resc
${UART}             sysbus.usart2
${CONSOLE_PORT}     3456
${BOARD}            stm32f4
${BOOT_TIMEOUT}     10
# 2026-01-15 12:00 UTC: Renode's RTC model applies the date fields one at a
# time, and some real dates pass through invalid ones (31 February).
${TEST_TIME}        1768478400


*** Test Cases ***
Boots And Prints The Banner
    [Documentation]    One text line between 0x00 delimiters: version, board and build kind.
    Wait For Line On Uart    edgedp \\S+ board=${BOARD} build=production
    ...    timeout=${BOOT_TIMEOUT}    treatAsRegex=true

Reports INFO Over The Console Socket
    [Documentation]    A fresh machine: DWT cycle counter found, RNG healthy, a blank backup SRAM
    ...    store that production firmware keeps closed until the first authenticated CONFIG,
    ...    no trusted clock yet.
    Connect After Boot
    ${info}=    Device Info
    Should Be Equal    ${info}[board]    ${BOARD}
    Should Be Equal    ${info}[build]    production
    Should Be Equal    ${info}[entropy]    ok
    Should Be Equal    ${info}[tick_kind]    dwt
    Should Be Equal As Integers    ${info}[tick_hz]    168000000
    Should Be Equal    ${info}[store]    fresh
    Should Not Be True    ${info}[store_ok]
    Should Not Be True    ${info}[time_ok]

Refuses Queries Until The Clock And The Budget Are Set
    [Documentation]    Fail closed: no trusted date (ERR_TIME), then a blank store that stays
    ...    closed until the first CONFIG (ERR_STORE); answers only after both authenticated
    ...    commands.
    Connect After Boot
    Query Should Fail With    ERR_TIME    0.5    0.5
    Set Device Time    ${TEST_TIME}
    Query Should Fail With    ERR_STORE    0.5    0.5
    Configure Budget    epsilon=1.0    daily_cap=3.0
    ${answer}=    Query    0.5    0.5
    Length Should Be    ${answer}[values]    2

Answers A DP Query Without Reporting Its Timing
    [Documentation]    Production images report ticks = 0: the sampler's running time depends
    ...    on the noise drawn (docs/privacy.md, "Timing"). The spend is charged.
    Connect After Boot
    Configure For Test
    ${answer}=    Query    0.1    0.7    0.2
    Length Should Be    ${answer}[values]    3
    Should Be Equal As Integers    ${answer}[ticks]    0
    ${budget}=    Budget
    Should Be Equal As Integers    ${budget}[daily_spent]    ${budget}[epsilon_micro]

Refuses Queries Once The Budget Is Spent And Still Answers PING And INFO
    Connect After Boot
    Configure For Test
    ${answered}=    Exhaust Budget    0.2    0.8
    Should Be Equal As Integers    ${answered}    3
    Query Should Fail With    ERR_BUDGET    0.5    0.5
    Device Should Respond
    ${info}=    Device Info
    Should Be Equal    ${info}[board]    ${BOARD}

Recovers From A Garbage Frame
    Connect After Boot
    Send Garbage    length=300    seed=6
    Device Should Respond
    Configure For Test
    ${answer}=    Query    0.25    0.75
    Length Should Be    ${answer}[values]    2

Keeps The Spend And Loses The Clock Across A Machine Reset
    [Documentation]    Renode's `machine Reset` resets RCC_BDCR and restarts the RTC model at
    ...    2020-01-01, unlike a reset of the chip; the backup SRAM (MappedMemory) keeps
    ...    the store. The device must refuse queries (ERR_TIME) until the clock is set
    ...    again, and the spend made before the reset still counts.
    Connect After Boot
    Configure For Test
    Query    0.5    0.5
    Execute Command    machine Reset
    Wait For Line On Uart    edgedp    timeout=${BOOT_TIMEOUT}
    Device Should Respond
    ${info}=    Device Info
    Should Not Be True    ${info}[time_ok]
    Query Should Fail With    ERR_TIME    0.5    0.5
    ${budget}=    Budget
    Should Be Equal As Integers    ${budget}[daily_spent]    1000000
    Set Device Time    ${TEST_TIME}
    ${answered}=    Exhaust Budget    0.2    0.8
    Should Be Equal As Integers    ${answered}    2

Test Image Answers Bit For Bit As The NumPy Reference
    [Documentation]    The harness on Renode: TEST_SEED re-keys the DRBG, then varied queries
    ...    (k, output modes, epsilon and range changes) must match edgedp's NumPy reference
    ...    exactly (edgedp.device.verify.replay, as `edgedp verify --target renode`).
    [Setup]    Start edgedp On Renode    ${TEST_IMAGE}
    Wait For Line On Uart    edgedp \\S+ board=${BOARD} build=test
    ...    timeout=${BOOT_TIMEOUT}    treatAsRegex=true
    Connect To Device    socket://127.0.0.1:${CONSOLE_PORT}
    Set Device Time    ${TEST_TIME}
    ${result}=    Replay Against Reference    ${REPLAY_QUERIES}
    Should Be Equal As Integers    ${result}[queries]    ${REPLAY_QUERIES}
    Should Be Equal As Integers    ${result}[mismatches]    0    msg=first mismatch: ${result}[first_mismatch]

Test Image DP Step Stays Under 100 Microseconds At 168 MHz
    [Documentation]    The DP step of a k = 10 query at the three benchmark epsilons, in DWT
    ...    CYCCNT ticks at 168 MHz. Renode's ticks are virtual time: 4 per executed instruction
    ...    at the platform's 42 MIPS (a flat rate, not silicon cycles; docs/benchmarks.md).
    [Setup]    Start edgedp On Renode    ${TEST_IMAGE}
    Connect After Boot
    ${info}=    Device Info
    Should Be Equal    ${info}[build]    test
    Should Be Equal    ${info}[tick_kind]    dwt
    Set Device Time    ${TEST_TIME}
    FOR    ${epsilon}    IN    0.1    1.0    10.0
        Configure Budget    epsilon=${epsilon}    daily_cap=1000.0
        # The first query after a configuration builds the sampler table (not the DP step).
        Query    0.02    0.3    0.05    0.1    0.08    0.15    0.1    0.05    0.1    0.05
        ${answer}=    Query    0.02    0.3    0.05    0.1    0.08    0.15    0.1    0.05    0.1    0.05
        ${us}=    Evaluate    ${answer}[ticks] / ${info}[tick_hz] * 1e6
        Log    epsilon ${epsilon}: DP step ${answer}[ticks] ticks = ${us} us at 168 MHz
        Should Be True    0 < ${answer}[ticks]
        Should Be True    ${us} < ${TARGET_US}
    END

Test Image Keeps The Budget Across A Machine Reset
    [Documentation]    The spend of the test image lives in the backup SRAM store, which
    ...    Renode's `machine Reset` keeps: the device must not forget what it spent.
    [Setup]    Start edgedp On Renode    ${TEST_IMAGE}
    Connect After Boot
    Set Device Time    ${TEST_TIME}
    Configure Budget    epsilon=0.5    daily_cap=2.0
    Query    0.5    0.5
    Query    0.5    0.5
    ${before}=    Budget
    Should Be Equal As Integers    ${before}[daily_spent]    1000000
    Execute Command    machine Reset
    Wait For Line On Uart    edgedp \\S+ board=${BOARD} build=test
    ...    timeout=${BOOT_TIMEOUT}    treatAsRegex=true
    Device Should Respond
    ${after}=    Budget
    Should Be Equal As Integers    ${after}[daily_spent]    1000000
    Set Device Time    ${TEST_TIME}
    ${answered}=    Exhaust Budget    0.2    0.8
    Should Be Equal As Integers    ${answered}    2


*** Keywords ***
Set Up Suite
    Setup
    File Should Exist    ${ELF}    msg=Build the firmware first: make firmware
    File Should Exist    ${TEST_IMAGE}    msg=Build the firmware first: make firmware
    Provision Elf    ${ELF}    ${TEST_ELF}

Start edgedp On Renode
    [Arguments]    ${image}=${TEST_ELF}
    Execute Command    $elf=@${image}
    Execute Command    $port=${CONSOLE_PORT}
    Execute Command    include @${RESC}
    Create Terminal Tester    ${UART}
    Start Emulation

Connect After Boot
    Wait For Line On Uart    edgedp    timeout=${BOOT_TIMEOUT}
    Connect To Device    socket://127.0.0.1:${CONSOLE_PORT}

Configure For Test
    [Documentation]    A production device refuses queries until its clock is set and
    ...    its budget configured, both authenticated with the device key.
    Set Device Time    ${TEST_TIME}
    Configure Budget    epsilon=1.0    daily_cap=3.0

Stop edgedp On Renode
    Disconnect From Device
    Test Teardown
