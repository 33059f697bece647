*** Comments ***
The scenarios of the Renode suite (renode/edgedp.robot) against the test image
in QEMU, which runs here: `make test` runs this suite with Robot Framework
(`robot --outputdir build/robot tests/robot`) after pytest.

Each test starts its own QEMU (edgedp.device.targets.qemu: build/qemu/edgedp.elf on
netduinoplus2, console on a loopback socket) through the keyword library
robot_keywords.py beside this file (robot --pythonpath tests/robot), the same library the Renode suite uses.


*** Settings ***
Documentation       edgedp in QEMU: boot, INFO, a DP query, budget exhaustion
...                 and recovery from a garbage frame.

Library             robot_keywords.EdgedpKeywords

Test Setup          Start Emulator    qemu
Test Teardown       Stop Emulator


*** Variables ***
${BOARD}            qemu-netduinoplus2


*** Test Cases ***
Boots And Prints The Banner
    [Documentation]    One text line between 0x00 delimiters: version, board and build kind.
    Boot Banner Should Match    edgedp \\S+ board=${BOARD} build=test

Reports INFO
    ${info}=    Device Info
    Should Be Equal    ${info}[board]    ${BOARD}
    Should Be Equal    ${info}[build]    test
    Should Be Equal    ${info}[entropy]    ok
    Should Be Equal    ${info}[noise_entropy]    ok
    Should Be Equal    ${info}[nonce_entropy]    ok
    Should Be True    ${info}[time_ok]
    Should Be True    ${info}[store_ok]

Answers A DP Query
    ${answer}=    Query    0.1    0.7    0.2
    Length Should Be    ${answer}[values]    3
    Should Be True    ${answer}[ticks] > 0
    ${budget}=    Budget
    Should Be Equal As Integers    ${budget}[daily_spent]    ${budget}[epsilon_micro]
    Should Be Equal As Integers    ${answer}[remaining]    ${budget}[remaining]

Refuses Queries Once The Budget Is Spent And Still Answers PING And INFO
    Configure Budget    epsilon=1.0    daily_cap=3.0
    ${answered}=    Exhaust Budget    0.2    0.8
    Should Be Equal As Integers    ${answered}    3
    Query Should Fail With    ERR_BUDGET    0.5    0.5
    Device Should Respond
    ${info}=    Device Info
    Should Be Equal    ${info}[board]    ${BOARD}
    ${budget}=    Budget
    Should Be Equal As Integers    ${budget}[remaining]    0

Recovers From A Garbage Frame
    ${errors}=    Send Garbage    length=300    seed=6
    Log    device answered the garbage with ${errors} error frame(s)
    Device Should Respond
    ${answer}=    Query    0.25    0.75
    Length Should Be    ${answer}[values]    2
